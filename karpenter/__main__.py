"""Module entry point: `python -m karpenter` runs the CLI."""

from karpenter import cli

raise SystemExit(cli.main())
