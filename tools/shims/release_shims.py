"""A pytest plugin: what PyTorch main's tests need of a released torch.

main's test/dynamo subclasses torch._dynamo.test_case.TestCaseWithNestedGraphBreaks,
which the releases (2.15.0 and older) lack. A plain subclass of TestCase
stands in for it; a bare alias would break the method resolution order of a
class that also derives from LoggingTestCase (HigherOrderOpVmapGuardTests).
It also provides requires_cuda_and_triton (below). Loaded by
tools/upstream_test.py and tools/stack_check.py (`-p release_shims`) before
collection, so the upstream files are run as they are.
"""

import torch._dynamo.test_case as test_case

if not hasattr(test_case, "TestCaseWithNestedGraphBreaks"):

    class TestCaseWithNestedGraphBreaks(test_case.TestCase):
        pass

    test_case.TestCaseWithNestedGraphBreaks = TestCaseWithNestedGraphBreaks

# main's test/dynamo/test_activation_checkpointing.py, as stored, decorates a
# test with requires_cuda_and_triton without importing it: a NameError at
# import on any torch. Provide the name (triton_utils defines it on the
# releases this harness runs main's tests on).
import builtins  # noqa: E402

from torch.testing._internal import triton_utils  # noqa: E402

if not hasattr(builtins, "requires_cuda_and_triton"):
    builtins.requires_cuda_and_triton = getattr(  # type: ignore[attr-defined]
        triton_utils, "requires_cuda_and_triton", triton_utils.requires_gpu_and_triton
    )
