"""ksm-adapter plugin for Sveltos: ServiceSet services become Sveltos Profiles, and the
ClusterSummary Sveltos makes for each Profile maps back to the service's k0rdent state. Pure
Python (standard library only), so the same modules run under CPython (testdata checks) and in
the componentize-py component (app.py)."""

#: Plugin version.
VERSION = "0.1.0"
#: The contract version this plugin implements.
CONTRACT_VERSION = "0.2.0"
