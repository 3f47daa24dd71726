"""``python -m kvdsl``."""

from kvdsl.cli import main

raise SystemExit(main())
