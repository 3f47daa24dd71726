"""``python -m kvdsl``."""

import sys

try:
    from kvdsl.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command loads: the line main gives it later
    print("kvdsl: interrupted", file=sys.stderr)
    raise SystemExit(130) from None

raise SystemExit(main())
