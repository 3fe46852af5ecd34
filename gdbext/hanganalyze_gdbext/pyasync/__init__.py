"""asyncio from memory: every task, its coroutine stack and what it awaits (``build.describe_asyncio``)."""
