"""A pytest plugin (`-p release_shims`): what PyTorch main's tests need of a
released torch, so that the upstream files run unedited."""

import builtins

import torch._dynamo.test_case as test_case
from torch.testing._internal import triton_utils

if not hasattr(test_case, "TestCaseWithNestedGraphBreaks"):
    # A subclass, not an alias: HigherOrderOpVmapGuardTests also derives
    # from LoggingTestCase, and an alias breaks its method resolution order.
    class TestCaseWithNestedGraphBreaks(test_case.TestCase):
        pass

    test_case.TestCaseWithNestedGraphBreaks = TestCaseWithNestedGraphBreaks

# main's test_activation_checkpointing.py uses it without importing it.
if not hasattr(builtins, "requires_cuda_and_triton"):
    builtins.requires_cuda_and_triton = getattr(  # type: ignore[attr-defined]
        triton_utils, "requires_cuda_and_triton", triton_utils.requires_gpu_and_triton
    )
