"""`python -m brokercluster ...`: run a local cluster of brokers, or operate a running one."""

import sys

from brokercluster.cli import main

sys.exit(main(sys.argv[1:]))
