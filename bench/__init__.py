"""The benchmark (``make bench`` = ``python -m bench.run``), its smoke check (``bench/smoke.py``) and
the prepared GPU check (``bench/gpu_check.sh``); ``bench/README.md`` describes them."""
