"""The one home of announcements: telling the model owners (``models[].owners``) through the webhook a stack names
(``notifications.webhook``) when a pool of theirs starts, pauses and finishes moving, once per event.

Either sender may see an event first: the deploy step (`gpu-rollout fleet advance`) or the in-cluster guard. Both
call :func:`announcements.announce.announce_stack` with the stack's cluster; the event is claimed on the cluster's
train Lease (:meth:`checks.lease.TrainLease.claim`) before it is sent, so the first claim sends it and every other
sender finds it claimed and sends nothing. The webhook's URL is read from the Secret the stack names, in the
stack's cluster, where both senders can read it.
"""
