"""Reads of the GPU pools a team's managed cluster runs, through the cloud's own API (:mod:`cloud_pools.read`)."""
