"""pytest's shared set-up for harness/: the helpers every suite imports live
in harness/testlib.py (importable by the benchmarks too); this makes sure
harness/ is on sys.path however pytest is started."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
