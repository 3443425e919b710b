"""Where ``LessonMemory`` lived before ``mas.team.memory``: an agent saved before 2026-12-03
names ``mas.memory.LessonMemory`` as its memory's provider, and still loads. New agents save
it as ``mas.LessonMemory``.

Stage: none: inference, after training (``LessonMemory``'s old home).
"""

from mas.team.memory import LessonMemory, LessonMemoryConfig

__all__ = ["LessonMemory", "LessonMemoryConfig"]
