"""Every built-in signature has a positive test on a real stack and a near-miss test.

The real stacks are cores of fixture programs (``tests/integration/test_signatures_cores.py``:
each case there is run both as a positive and as a near miss), or real captured text
(``tests/unit/test_signatures_text.py``: each case matched whole, then with its key phrase
removed or broken).  A signature added without either fails here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hanganalyze.analyze.signatures import load_signatures

TESTS = Path(__file__).resolve().parents[1]


def _module(path: Path):
    spec = importlib.util.spec_from_file_location("_cov_" + path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(TESTS))  # the integration module imports tests/helpers.py
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(TESTS))
    return mod


def test_every_builtin_signature_has_a_positive_and_a_near_miss_test():
    cores = _module(TESTS / "integration" / "test_signatures_cores.py")
    text = _module(TESTS / "unit" / "test_signatures_text.py")
    by_core = {case[0] for case in cores.CASES}
    by_text = {text.read(name)[1] for name, _key in text.CASES}
    classes = _module(TESTS / "unit" / "test_signatures_classes.py")
    tasks = _module(TESTS / "unit" / "test_asyncio_task_signatures_text.py")  # asyncio task stacks
    ml3 = _module(TESTS / "unit" / "test_ml3_classes.py")  # classes of the third held-out ML round
    ml4 = _module(TESTS / "unit" / "test_ml4_classes.py")  # ... and of the fourth
    mech = _module(TESTS / "unit" / "test_signatures_mech.py")  # classes widened or added by mechanism
    logs = _module(TESTS / "unit" / "test_loglines_signatures.py")  # log-line classes of ML jobs (issue 32)
    common = _module(TESTS / "unit" / "test_signatures_common.py")  # frequent classes the database lacked
    blind19 = _module(TESTS / "unit" / "test_text_blind19.py")  # classes added by the open rounds' misses
    blind22 = _module(TESTS / "unit" / "test_text_blind22_27.py")  # ... and by rounds 22 and 27's
    blind65 = _module(TESTS / "unit" / "test_text_blind65_69.py")  # ... and by rounds 65-69's
    gui = _module(TESTS / "unit" / "test_signatures_gui.py")  # GUI toolkits used off their thread
    libs = _module(TESTS / "unit" / "test_signatures_libraries.py")  # library classes the corpus kept meeting
    futures = _module(TESTS / "integration" / "test_nested_future_waits.py")  # waits on a future from its producer
    qjoin = _module(TESTS / "integration" / "test_queue_join.py")  # Queue.join without its task_done
    covered = (by_core | by_text | set(classes.COVERED) | set(tasks.COVERED) | set(ml3.COVERED) | set(ml4.COVERED)
               | set(mech.COVERED) | set(logs.COVERED) | set(common.COVERED) | set(blind19.COVERED)
               | set(blind22.COVERED) | set(blind65.COVERED) | set(gui.COVERED) | set(libs.COVERED)
               | set(futures.COVERED) | set(qjoin.COVERED))
    ids = {s.id for s in load_signatures().signatures}
    missing = sorted(ids - covered)
    assert not missing, "signatures with no real-stack positive + near-miss test: %s" % missing
    assert len(ids) >= 30
    # a test case naming a signature that does not exist would be testing nothing
    assert not (covered - ids - {None}), covered - ids
