"""``python -m worker``: run the RunPod worker."""

from worker.main import exit_now, main

exit_now(main())
