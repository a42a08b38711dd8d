import pytest
from runner_memory import MemoryTarget


@pytest.fixture
def memory_target() -> MemoryTarget:
    return MemoryTarget()
