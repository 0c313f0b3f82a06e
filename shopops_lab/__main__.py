"""`python -m shopops_lab` works even where the `shopops-lab` script is not on PATH."""

from shopops_lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
