"""The role definitions shipped with mas (TOML data, installed as the package ``mas.roles``)."""
