"""The team: what it is and how one rollout of it runs.

Stage: rollout.

- ``scenario``: scenarios and roles, loaded from data files (a scenario's team, tasks and reward);
- ``teamfile``: an autogen team file (``team.dump_component()``) as a scenario;
- ``rollout``: the autogen team built fresh for one rollout, run, and split into role traces;
  the system message of a role, with the ids of the lessons shown recorded as data;
- ``memory``: ``LessonMemory``, a role's lessons for any autogen agent at inference, after training.
"""
