"""`python cli.py ...` at the repository root does what `irrun ...` does."""
from irrun.cli import main

if __name__ == "__main__":
    main()
