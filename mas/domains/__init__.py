"""What each kind of task needs: reading the answer off a transcript, the reward, and the
generated task packs (maths, multi-hop QA, symbolic answers)."""
