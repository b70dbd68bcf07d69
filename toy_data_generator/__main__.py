"""``python -m toy_data_generator generate --scenario 3b --out DIR [--dims 3] [--size 64] [--seed 0]``."""

import sys

from toy_data_generator.cli import main

if __name__ == "__main__":
    sys.exit(main())
