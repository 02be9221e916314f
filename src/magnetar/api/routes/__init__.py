"""The broker's routes, one Powertools Router per resource (Pulsar's admin v2 and REST paths,
Magnetar's consumer and reader paths); each route declares its access (`magnetar.api.access`)."""
