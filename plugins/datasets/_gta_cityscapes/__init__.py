"""GTA5 (i.i.d.) -> Cityscapes (OoD) with synthetic label-switch ambiguity (paper appendix B.3): one
module per step of reading, preparing and splitting the data (docs/design-rationale.md,
"GTA5 → Cityscapes").
"""
