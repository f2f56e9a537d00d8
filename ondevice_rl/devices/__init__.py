"""Several devices and hosts: populations and batches placed on a mesh
(``sharding``), JAX's multi-controller runtime started from flags
(``distributed``)."""
