"""A third-party values-seg plugin package: one component of every kind, registered through the
entry-point group ``values_seg`` (see ``values_seg_example-0.1.0.dist-info/entry_points.txt``).

values-seg's tests put this folder on the path and run a sweep with these components; the
examples of docs/guides/add-component.md are these files.
"""
