"""GTA5 (i.i.d.) -> Cityscapes (OoD) with synthetic label-switch ambiguity (paper appendix B.3).

``layout`` finds image/label pairs in the official on-disk layouts, ``reading`` decodes and
checks the source PNGs, ``labels`` maps Cityscapes label ids to the 19 training ids (from the
official ``cityscapesscripts`` table), ``transform`` crops and rescales, ``prepare`` runs the
resumable preprocessing with its manifest, ``splits`` draws the Figure 7 splits, ``ambiguity``
switches the five classes to their twins, ``prepared`` reads a prepared folder back.
"""
