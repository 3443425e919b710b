"""The scenarios shipped with mas (data, installed as the package ``mas.scenarios``)."""
