"""A real Kubernetes for the ``kubernetes`` target: the cached build, the PKI and a throwaway local cluster."""
