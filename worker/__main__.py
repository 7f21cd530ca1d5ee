"""``python -m worker``: run the RunPod worker."""

import sys

from worker.main import main

sys.exit(main())
