"""LIDC-IDRI (paper appendix B.2): pylidc selection, DICOM -> 64^3 crops with four raters, metadata-shift splits."""
