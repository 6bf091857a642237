"""[agent.tools.X] requires_approval = "always": refused unless the server runs with --approve."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import approval_config, dump, text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return approval_config(tmp_path)


async def test_refused_without_approve(open_session, config):
    async with open_session("--config", config) as session:
        result = await session.call_tool("calculate", {"expression": "2 * (3 + 4)"})
        assert result.is_error is True, dump(result)
        assert "--approve" in text_of(result), dump(result)
        assert "14" not in text_of(result), dump(result)
        # Only the tool that requires approval is refused.
        other = await session.call_tool("echo", {"text": "no approval needed"})
        assert other.is_error is False and text_of(other) == "no approval needed", dump(other)


@pytest.mark.parametrize("approve", ["calculate", "all"])
async def test_approved(open_session, config, approve):
    async with open_session("--config", config, "--approve", approve) as session:
        result = await session.call_tool("calculate", {"expression": "2 * (3 + 4)"})
        assert result.is_error is False, dump(result)
        assert text_of(result) == "14", dump(result)


async def test_approving_another_tool_does_not_approve_this_one(open_session, config):
    async with open_session("--config", config, "--approve", "echo") as session:
        result = await session.call_tool("calculate", {"expression": "1 + 1"})
        assert result.is_error is True, dump(result)
        assert "--approve" in text_of(result), dump(result)
