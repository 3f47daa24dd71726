"""Reusable IR-building blocks: index math, layouts, walks, rotary, RMSNorm, quantisation."""
