"""`python -m shopops_lab.sim burst_day --seed 7`: the `simulate` command without the script."""

from shopops_lab.sim.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
