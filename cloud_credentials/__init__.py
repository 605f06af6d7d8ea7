"""The one home of the credentials and clients the project uses to call cloud and cluster-fronted HTTP APIs.

Each credential turns one request into the headers that authenticate it, and says in words what it is and how to
fix it when it is refused (:mod:`cloud_credentials.credentials`): a bearer token from a file, an environment
variable or the kubeconfig's identity; the Azure identity in use, through ``azure-identity``; AWS Signature
Version 4. Prometheus is read through them today (``checks.prometheus``); later cloud reads (quota, adoption) take
their credentials from here too, so no other module of the project talks to a cloud identity. Imports nothing of
the project.
"""
