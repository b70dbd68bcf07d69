"""Built-in experiment trackers (hook ``values_seg_trackers``), registered the way a third party registers one."""
