/* A Vulkan layer that records what a WebGPU implementation hands the driver: every
 * vkCreateShaderModule's SPIR-V (as DUMP_DIR/NNN.spv), and, where the device offers
 * VK_KHR_pipeline_executable_properties, the driver's statistics of every compute pipeline
 * (registers and the like, as DUMP_DIR/stats.txt lines naming the module's file).
 *
 * wgpu-py exposes neither naga's SPIR-V nor the driver's view of it; this is how
 * benchmarks/shaderstats.py reads both for wgpu-native (naga) and Dawn (Tint) on the same GPU.
 * Self-contained: the few Vulkan declarations it needs are written out below (no headers on the
 * machines here). Build: gcc -shared -fPIC -O2 -o libkvdsl_dump_layer.so kvdsl_dump_layer.c
 * Enable: VK_ADD_LAYER_PATH=<this folder> VK_INSTANCE_LAYERS=VK_LAYER_KVDSL_dump
 * KVDSL_DUMP_DIR=<folder>. Diagnostics (they change what runs; see benchmarks/shaderstats.py):
 * KVDSL_BARRIER_SEMANTICS=N, KVDSL_VULKAN_MEMORY_MODEL=1, KVDSL_DROP_EXECUTION_MODE=N;
 * KVDSL_NO_STATS=1 leaves the device as
 * the application asks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef int32_t VkResult;
typedef uint32_t VkFlags;
typedef uint32_t VkBool32;
typedef void *VkInstance;
typedef void *VkPhysicalDevice;
typedef void *VkDevice;
typedef uint64_t VkShaderModule;
typedef uint64_t VkPipeline;
typedef uint64_t VkPipelineCache;
typedef uint64_t VkPipelineLayout;
typedef void (*PFN_vkVoidFunction)(void);
typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);
typedef PFN_vkVoidFunction (*PFN_vkGetDeviceProcAddr)(VkDevice, const char *);
typedef PFN_vkVoidFunction (*PFN_GetPhysicalDeviceProcAddr)(VkInstance, const char *);

typedef struct { int32_t sType; const void *pNext; } VkBaseInStructure;

/* vk_layer.h */
enum { LOADER_INSTANCE_CREATE_INFO = 47, LOADER_DEVICE_CREATE_INFO = 48, LAYER_LINK_INFO = 0 };
typedef struct VkLayerInstanceLink_ {
    struct VkLayerInstanceLink_ *pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_GetPhysicalDeviceProcAddr pfnNextGetPhysicalDeviceProcAddr;
} VkLayerInstanceLink;
typedef struct {
    int32_t sType; const void *pNext; int32_t function;
    union { VkLayerInstanceLink *pLayerInfo; void *other; } u;
} VkLayerInstanceCreateInfo;
typedef struct VkLayerDeviceLink_ {
    struct VkLayerDeviceLink_ *pNext;
    PFN_vkGetInstanceProcAddr pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr pfnNextGetDeviceProcAddr;
} VkLayerDeviceLink;
typedef struct {
    int32_t sType; const void *pNext; int32_t function;
    union { VkLayerDeviceLink *pLayerInfo; void *other; } u;
} VkLayerDeviceCreateInfo;

typedef struct {
    int32_t sType; const void *pNext; VkFlags flags;
    uint32_t queueCreateInfoCount; const void *pQueueCreateInfos;
    uint32_t enabledLayerCount; const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount; const char *const *ppEnabledExtensionNames;
    const void *pEnabledFeatures;
} VkDeviceCreateInfo;
typedef struct {
    int32_t sType; const void *pNext; VkFlags flags; size_t codeSize; const uint32_t *pCode;
} VkShaderModuleCreateInfo;
typedef struct {
    int32_t sType; const void *pNext; VkFlags flags; int32_t stage;
    VkShaderModule module; const char *pName; const void *pSpecializationInfo;
} VkPipelineShaderStageCreateInfo;
typedef struct {
    int32_t sType; const void *pNext; VkFlags flags; VkPipelineShaderStageCreateInfo stage;
    VkPipelineLayout layout; VkPipeline basePipelineHandle; int32_t basePipelineIndex;
} VkComputePipelineCreateInfo;

/* VK_KHR_pipeline_executable_properties */
#define EXT_NAME "VK_KHR_pipeline_executable_properties"
enum {
    ST_FEATURES = 1000269000, ST_PIPELINE_INFO = 1000269001, ST_EXEC_PROPS = 1000269002,
    ST_EXEC_INFO = 1000269003, ST_EXEC_STAT = 1000269004,
    CAPTURE_STATISTICS = 0x40,
};
typedef struct { int32_t sType; void *pNext; VkBool32 pipelineExecutableInfo; } ExecFeatures;
typedef struct { int32_t sType; const void *pNext; VkPipeline pipeline; } PipelineInfo;
typedef struct {
    int32_t sType; void *pNext; VkFlags stages; char name[256]; char description[256];
    uint32_t subgroupSize;
} ExecProps;
typedef struct {
    int32_t sType; const void *pNext; VkPipeline pipeline; uint32_t executableIndex;
} ExecInfo;
typedef struct {
    int32_t sType; void *pNext; char name[256]; char description[256]; int32_t format;
    union { VkBool32 b32; int64_t i64; uint64_t u64; double f64; } value;
} ExecStat;

typedef VkResult (*PFN_CreateInstance)(const void *, const void *, VkInstance *);
typedef VkResult (*PFN_CreateDevice)(VkPhysicalDevice, const VkDeviceCreateInfo *, const void *,
                                     VkDevice *);
typedef VkResult (*PFN_CreateShaderModule)(VkDevice, const VkShaderModuleCreateInfo *,
                                           const void *, VkShaderModule *);
typedef VkResult (*PFN_CreateComputePipelines)(VkDevice, VkPipelineCache, uint32_t,
                                               const VkComputePipelineCreateInfo *, const void *,
                                               VkPipeline *);
typedef VkResult (*PFN_GetExecProps)(VkDevice, const PipelineInfo *, uint32_t *, ExecProps *);
typedef VkResult (*PFN_GetExecStats)(VkDevice, const ExecInfo *, uint32_t *, ExecStat *);
typedef VkResult (*PFN_EnumDevExt)(VkPhysicalDevice, const char *, uint32_t *, void *);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static PFN_vkGetInstanceProcAddr next_gipa;
static VkInstance instance;
static PFN_vkGetDeviceProcAddr next_gdpa;
static PFN_CreateShaderModule next_create_module;
static PFN_CreateComputePipelines next_create_pipelines;
static PFN_GetExecProps get_props;
static PFN_GetExecStats get_stats;
static int stats_on;
static int mm_on; /* the device runs with the vulkanMemoryModel feature (KVDSL_VULKAN_MEMORY_MODEL) */
static unsigned counter;
#define MAX_MODULES 4096
static VkShaderModule modules[MAX_MODULES];
static unsigned module_ids[MAX_MODULES];
static unsigned n_modules;

static const char *dump_dir(void) {
    const char *d = getenv("KVDSL_DUMP_DIR");
    return d ? d : ".";
}

static VkResult layer_CreateInstance(const void *info, const void *alloc, VkInstance *inst) {
    const VkBaseInStructure *s = ((const VkBaseInStructure *)info)->pNext;
    VkLayerInstanceCreateInfo *chain = NULL;
    for (; s; s = s->pNext)
        if (s->sType == LOADER_INSTANCE_CREATE_INFO &&
            ((VkLayerInstanceCreateInfo *)s)->function == LAYER_LINK_INFO) {
            chain = (VkLayerInstanceCreateInfo *)s;
            break;
        }
    if (!chain) return -3; /* VK_ERROR_INITIALIZATION_FAILED */
    next_gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    PFN_CreateInstance create = (PFN_CreateInstance)next_gipa(NULL, "vkCreateInstance");
    VkResult r = create(info, alloc, inst);
    if (r == 0) instance = *inst;
    return r;
}

static int has_extension(VkPhysicalDevice phys) {
    PFN_EnumDevExt enumerate =
        (PFN_EnumDevExt)next_gipa(instance, "vkEnumerateDeviceExtensionProperties");
    if (!enumerate) return 0;
    uint32_t n = 0;
    if (enumerate(phys, NULL, &n, NULL) != 0 || n == 0) return 0;
    char *props = calloc(n, 260); /* VkExtensionProperties: char[256] + uint32_t */
    int found = 0;
    if (enumerate(phys, NULL, &n, props) == 0)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(props + 260 * i, EXT_NAME) == 0) found = 1;
    free(props);
    return found;
}

static VkResult layer_CreateDevice(VkPhysicalDevice phys, const VkDeviceCreateInfo *info,
                                   const void *alloc, VkDevice *dev) {
    const VkBaseInStructure *s = info->pNext;
    VkLayerDeviceCreateInfo *chain = NULL;
    for (; s; s = s->pNext)
        if (s->sType == LOADER_DEVICE_CREATE_INFO &&
            ((VkLayerDeviceCreateInfo *)s)->function == LAYER_LINK_INFO) {
            chain = (VkLayerDeviceCreateInfo *)s;
            break;
        }
    if (!chain) return -3;
    PFN_vkGetInstanceProcAddr gipa = chain->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    next_gdpa = chain->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    chain->u.pLayerInfo = chain->u.pLayerInfo->pNext;
    if (!next_gipa) next_gipa = gipa;
    PFN_CreateDevice create = (PFN_CreateDevice)gipa(NULL, "vkCreateDevice");
    /* Ask for the executable statistics where the device has them. */
    VkDeviceCreateInfo copy = *info;
    const char *names[256];
    ExecFeatures feat = {ST_FEATURES, (void *)info->pNext, 1};
    int want = getenv("KVDSL_NO_STATS") == NULL && has_extension(phys) &&
               info->enabledExtensionCount < 255;
    if (want) {
        for (uint32_t i = 0; i < info->enabledExtensionCount; i++)
            names[i] = info->ppEnabledExtensionNames[i];
        names[info->enabledExtensionCount] = EXT_NAME;
        copy.enabledExtensionCount = info->enabledExtensionCount + 1;
        copy.ppEnabledExtensionNames = names;
        copy.pNext = &feat;
    }
    /* KVDSL_VULKAN_MEMORY_MODEL: the vulkanMemoryModel feature, set in the application's
     * Vulkan 1.2 or memory-model features struct where it chains one, else chained here. */
    struct { int32_t sType; void *pNext; VkBool32 model, device_scope, chains; } mm_features = {
        1000211000, NULL, 1, 0, 0};
    const char *mm_how = "off";
    int use_copy = want;
    if (getenv("KVDSL_VULKAN_MEMORY_MODEL")) {
        use_copy = 1;
        mm_how = "chained";
        for (VkBaseInStructure *c = (VkBaseInStructure *)copy.pNext; c;
             c = (VkBaseInStructure *)c->pNext) {
            if (c->sType == 51) { /* VkPhysicalDeviceVulkan12Features: vulkanMemoryModel */
                ((VkBool32 *)((char *)c + 16))[41] = 1;
                mm_how = "set in Vulkan12Features";
            } else if (c->sType == 1000211000) {
                ((VkBool32 *)((char *)c + 16))[0] = 1;
                mm_how = "set in VulkanMemoryModelFeatures";
            }
        }
        if (!strcmp(mm_how, "chained")) {
            mm_features.pNext = (void *)copy.pNext;
            copy.pNext = &mm_features;
        }
    }
    VkResult r = create(phys, use_copy ? &copy : info, alloc, dev);
    if (r != 0 && use_copy) { /* fall back to the device as asked */
        want = 0;
        mm_how = "refused";
        r = create(phys, info, alloc, dev);
    }
    if (r != 0) return r;
    mm_on = strcmp(mm_how, "off") != 0 && strcmp(mm_how, "refused") != 0;
    next_create_module = (PFN_CreateShaderModule)next_gdpa(*dev, "vkCreateShaderModule");
    next_create_pipelines =
        (PFN_CreateComputePipelines)next_gdpa(*dev, "vkCreateComputePipelines");
    stats_on = want;
    if (want) {
        get_props = (PFN_GetExecProps)next_gdpa(*dev, "vkGetPipelineExecutablePropertiesKHR");
        get_stats = (PFN_GetExecStats)next_gdpa(*dev, "vkGetPipelineExecutableStatisticsKHR");
        stats_on = get_props && get_stats;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/layer.log", dump_dir());
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "device: %s %s, statistics %s, Vulkan memory model %s\n", EXT_NAME,
                has_extension(phys) ? "offered" : "not offered", stats_on ? "on" : "off",
                mm_how);
        fclose(f);
    }
    return 0;
}

/* KVDSL_BARRIER_SEMANTICS=N (a diagnostic, not for results one keeps): every OpControlBarrier
 * takes the module's 32-bit unsigned constant N as its memory semantics (e.g. 0: none), where
 * the module has one. Returns the patched copy (free it) or NULL. */
static uint32_t *patch_barriers(const uint32_t *code_in, size_t size, size_t *out_size) {
    const char *want = getenv("KVDSL_BARRIER_SEMANTICS");
    if (!want) return NULL;
    uint32_t value = (uint32_t)strtoul(want, NULL, 0);
    size_t n = size / 4;
    uint32_t *code = malloc(size);
    memcpy(code, code_in, size);
    *out_size = size;
    uint32_t uint_type = 0, constant = 0;
    for (size_t i = 5; i < n; i += code[i] >> 16 ? code[i] >> 16 : 1) {
        uint32_t op = code[i] & 0xFFFF;
        if (op == 21 && code[i + 2] == 32 && code[i + 3] == 0) uint_type = code[i + 1];
        if (op == 43 && uint_type && code[i + 1] == uint_type && code[i + 3] == value)
            constant = code[i + 2];
    }
    for (size_t i = 5; constant && i < n; i += code[i] >> 16 ? code[i] >> 16 : 1)
        if ((code[i] & 0xFFFF) == 224) code[i + 3] = constant;
    if (!constant) {
        free(code);
        return NULL;
    }
    return code;
}

/* KVDSL_VULKAN_MEMORY_MODEL=1 (a diagnostic): a GLSL450-memory-model module (naga's) declared
 * in the Vulkan memory model instead, as Tint writes it: OpCapability VulkanMemoryModel after
 * the first capability, OpMemoryModel's model 1 -> 3 (SPIR-V 1.5 and later, where it is core;
 * the module must carry no Coherent or Volatile decoration, which naga's do not). The device is
 * created with the vulkanMemoryModel feature (layer_CreateDevice). Returns the patched copy or
 * NULL. */
static uint32_t *patch_memory_model(const uint32_t *code_in, size_t size, size_t *out_size) {
    if (!mm_on || size < 24 || code_in[1] < 0x10500) return NULL;
    size_t n = size / 4, first_cap = 0, model = 0;
    for (size_t i = 5; i < n; i += code_in[i] >> 16 ? code_in[i] >> 16 : 1) {
        uint32_t op = code_in[i] & 0xFFFF;
        if (op == 17 && !first_cap) first_cap = i;
        if (op == 14) model = i;
        if (op == 71 && (code_in[i + 2] == 21 || code_in[i + 2] == 23)) return NULL;
    }
    if (!first_cap || !model || code_in[model + 2] != 1) return NULL;
    uint32_t *code = malloc(size + 8);
    size_t at = first_cap + 2; /* after OpCapability X (2 words) */
    memcpy(code, code_in, at * 4);
    code[at] = (2u << 16) | 17;
    code[at + 1] = 5345; /* VulkanMemoryModel */
    memcpy(code + at + 2, code_in + at, (n - at) * 4);
    code[model + 2 + 2] = 3; /* OpMemoryModel moved by 2 words; its memory model operand */
    *out_size = size + 8;
    return code;
}

/* KVDSL_DROP_EXECUTION_MODE=N (a diagnostic): the module without its OpExecutionMode
 * instructions of mode N (e.g. 6023, MaximallyReconvergesKHR, which Tint writes and naga does
 * not). Returns the shortened copy or NULL. */
static uint32_t *drop_execution_mode(const uint32_t *code_in, size_t size, size_t *out_size) {
    const char *want = getenv("KVDSL_DROP_EXECUTION_MODE");
    if (!want || size < 24) return NULL;
    uint32_t mode = (uint32_t)strtoul(want, NULL, 0);
    size_t n = size / 4, kept = 5, dropped = 0;
    uint32_t *code = malloc(size);
    memcpy(code, code_in, 20);
    for (size_t i = 5; i < n;) {
        uint32_t len = code_in[i] >> 16 ? code_in[i] >> 16 : 1;
        if ((code_in[i] & 0xFFFF) == 16 && len >= 3 && code_in[i + 2] == mode) {
            dropped++;
        } else {
            memcpy(code + kept, code_in + i, len * 4);
            kept += len;
        }
        i += len;
    }
    if (!dropped) {
        free(code);
        return NULL;
    }
    *out_size = kept * 4;
    return code;
}

typedef uint32_t *(*Patch)(const uint32_t *, size_t, size_t *);
static const Patch patches[] = {patch_barriers, patch_memory_model, drop_execution_mode};
#define N_PATCHES (sizeof patches / sizeof patches[0])

static VkResult layer_CreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *info,
                                         const void *alloc, VkShaderModule *module) {
    /* The diagnostics, each on the module as the one before it left it. */
    VkShaderModuleCreateInfo copy = *info;
    uint32_t *made[N_PATCHES] = {0};
    for (size_t p = 0; p < N_PATCHES; p++) {
        size_t size = 0;
        made[p] = patches[p](copy.pCode, copy.codeSize, &size);
        if (made[p]) {
            copy.pCode = made[p];
            copy.codeSize = size;
        }
    }
    info = &copy;
    VkResult r = next_create_module(dev, info, alloc, module);
    pthread_mutex_lock(&lock);
    unsigned id = counter++;
    if (r == 0 && n_modules < MAX_MODULES) {
        modules[n_modules] = *module;
        module_ids[n_modules++] = id;
    }
    pthread_mutex_unlock(&lock);
    char path[4096];
    snprintf(path, sizeof path, "%s/%03u.spv", dump_dir(), id);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(info->pCode, 1, info->codeSize, f);
        fclose(f);
    }
    for (size_t p = 0; p < N_PATCHES; p++) free(made[p]);
    return r;
}

static int module_id(VkShaderModule m) {
    int id = -1;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < n_modules; i++)
        if (modules[i] == m) id = (int)module_ids[i];
    pthread_mutex_unlock(&lock);
    return id;
}

static void write_stats(VkDevice dev, VkPipeline pipe, int id) {
    PipelineInfo pinfo = {ST_PIPELINE_INFO, NULL, pipe};
    uint32_t n = 0;
    if (get_props(dev, &pinfo, &n, NULL) != 0 || n == 0) return;
    ExecProps *props = calloc(n, sizeof *props);
    for (uint32_t i = 0; i < n; i++) props[i].sType = ST_EXEC_PROPS;
    get_props(dev, &pinfo, &n, props);
    char path[4096];
    snprintf(path, sizeof path, "%s/stats.txt", dump_dir());
    FILE *f = fopen(path, "a");
    for (uint32_t e = 0; f && e < n; e++) {
        ExecInfo einfo = {ST_EXEC_INFO, NULL, pipe, e};
        uint32_t k = 0;
        if (get_stats(dev, &einfo, &k, NULL) != 0 || k == 0) continue;
        ExecStat *st = calloc(k, sizeof *st);
        for (uint32_t i = 0; i < k; i++) st[i].sType = ST_EXEC_STAT;
        get_stats(dev, &einfo, &k, st);
        for (uint32_t i = 0; i < k; i++) {
            fprintf(f, "%03d.spv\t%s\tsubgroup=%u\t%s\t", id, props[e].name,
                    props[e].subgroupSize, st[i].name);
            switch (st[i].format) {
            case 0: fprintf(f, "%u\n", st[i].value.b32); break;
            case 1: fprintf(f, "%lld\n", (long long)st[i].value.i64); break;
            case 2: fprintf(f, "%llu\n", (unsigned long long)st[i].value.u64); break;
            default: fprintf(f, "%g\n", st[i].value.f64); break;
            }
        }
        free(st);
    }
    if (f) fclose(f);
    free(props);
}

static VkResult layer_CreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                             const VkComputePipelineCreateInfo *infos,
                                             const void *alloc, VkPipeline *pipes) {
    if (!stats_on) return next_create_pipelines(dev, cache, n, infos, alloc, pipes);
    VkComputePipelineCreateInfo *copy = calloc(n, sizeof *copy);
    for (uint32_t i = 0; i < n; i++) {
        copy[i] = infos[i];
        copy[i].flags |= CAPTURE_STATISTICS;
    }
    VkResult r = next_create_pipelines(dev, cache, n, copy, alloc, pipes);
    if (r == 0)
        for (uint32_t i = 0; i < n; i++) write_stats(dev, pipes[i], module_id(infos[i].stage.module));
    free(copy);
    return r;
}

#define EXPORT __attribute__((visibility("default")))

EXPORT PFN_vkVoidFunction vkGetDeviceProcAddr(VkDevice dev, const char *name) {
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)vkGetDeviceProcAddr;
    if (!strcmp(name, "vkCreateShaderModule")) return (PFN_vkVoidFunction)layer_CreateShaderModule;
    if (!strcmp(name, "vkCreateComputePipelines"))
        return (PFN_vkVoidFunction)layer_CreateComputePipelines;
    return next_gdpa ? next_gdpa(dev, name) : NULL;
}

EXPORT PFN_vkVoidFunction vkGetInstanceProcAddr(VkInstance inst, const char *name) {
    if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)vkGetInstanceProcAddr;
    if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)layer_CreateInstance;
    if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)layer_CreateDevice;
    if (!strcmp(name, "vkGetDeviceProcAddr") || !strcmp(name, "vkCreateShaderModule") ||
        !strcmp(name, "vkCreateComputePipelines"))
        return vkGetDeviceProcAddr(NULL, name);
    return next_gipa ? next_gipa(inst, name) : NULL;
}
