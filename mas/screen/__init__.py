"""The lesson screen: what may not become a lesson, refused in layers, each naming itself in
the reason.

Stage: screen (the lessons a step's advantages and edits propose; every library file as it is read).

- ``layers``: the screen, layer by layer (``screen``, ``refusals``), and what a step's lessons
  are checked against (``step_material``);
- ``text``: the normalising layer, the text as the rules read it and its other readings;
- ``rules`` and ``rules.txt``: the instruction rules, as data;
- ``model`` and ``model.npz``: the learned layer, its weights read at the first lesson;
- ``train``: rebuilds ``model.npz`` (``python -m mas.screen.train --train``); nothing that
  screens imports it.
"""

from mas.screen.layers import answer_weight, refusals, screen, step_material

__all__ = ["answer_weight", "refusals", "screen", "step_material"]
