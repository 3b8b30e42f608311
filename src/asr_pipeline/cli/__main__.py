"""``python -m asr_pipeline.cli``: the same as the ``asr-pipeline`` console script."""

import sys

from asr_pipeline.cli import main

sys.exit(main())
