"""The one seam to the model: clients from a short spec, the wrappers around them, the
endpoint adapter with its retries, the embedded server and the deterministic fake.

Stage: none: the model seam (every model call).
"""
