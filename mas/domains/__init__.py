"""What each kind of task needs: reading the answer off a transcript, the reward, and the
generated task packs (maths, multi-hop QA, symbolic answers).

Stage: reward (and reading the answer it scores); the task packs are written before training.
"""
