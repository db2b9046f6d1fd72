"""A pytest plugin: what PyTorch main's tests need of a released torch.

main's test/dynamo subclasses torch._dynamo.test_case.TestCaseWithNestedGraphBreaks,
which the releases (2.15.0 and older) lack. A plain subclass of TestCase
stands in for it; a bare alias would break the method resolution order of a
class that also derives from LoggingTestCase (HigherOrderOpVmapGuardTests).
Loaded by tools/upstream_test.py (`-p release_shims`) before collection, so
the upstream files are run as they are.
"""

import torch._dynamo.test_case as test_case

if not hasattr(test_case, "TestCaseWithNestedGraphBreaks"):

    class TestCaseWithNestedGraphBreaks(test_case.TestCase):
        pass

    test_case.TestCaseWithNestedGraphBreaks = TestCaseWithNestedGraphBreaks
