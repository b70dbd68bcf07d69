"""The evaluation stage: one case, one combination, the validation fits, its inputs and its folder."""
