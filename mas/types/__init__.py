"""The typed data that crosses a boundary, one module per kind; import each name from its module
(``from mas.types.lessons import Lesson``): this package re-exports nothing.

Stage: none (the data every stage passes on). Everything persisted is a pydantic v2 model, goes
to disk as ``model_dump(mode="json")`` and carries a schema version.

- ``base``: ``Frozen``, ``Settings``, ``Plain``; ``SCHEMA_VERSION``;
- ``tasks``: ``Task``, ``Passage``;
- ``lessons``: ``Lesson``, the edits (``Add``, ``Modify``, ``Delete``, ``Keep``: ``Edit``),
  ``Version`` and its ``Provenance``, ``Budget``; ``GLOBAL``, ``REVIEW_SCHEMA``, ``PERSON_SCHEMA``;
- ``rollouts``: ``Rollout``, ``RoleTrace``, ``Turn``, ``ToolCall``, ``Group``;
- ``replies``: what the learning calls return (``Summary``, ``Advantage``, ``EditBatch``,
  ``Equivalence``, ``DirectLessons``) and the schemas advertised for them;
- ``usage``: ``UsageEvent``;
- ``refusals``: ``QuarantineItem``, ``RefusedEdit``;
- ``evidence``: ``Effect``, ``PromotionMove``;
- ``reports``: ``StepReport``, ``StageCount``, ``EndpointCounts``;
- ``review``: the review gate's ``PendingStep``, ``PendingEdit``, ``Proposal``, ``Decision``.
"""
