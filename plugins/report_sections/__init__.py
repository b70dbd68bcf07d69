"""Built-in report sections (hook ``values_seg_report_sections``), one module per section, registered
the way a third party registers one; helper modules start with an underscore."""
