"""The contracts a plugin implements: prediction model, measure, aggregation and its lesion scale, dataset, task,
quantity, tracker, stage (with the run context its jobs share)."""
