"""GRPO training of the retrieval agent on TRL (docs/training.md).

``rewards`` and ``advantages`` hold the pure maths; ``rollout`` the multi-turn ``rollout_func``;
``trainer`` the ``GRPOTrainer`` subclass and run arguments; ``kl`` the log-only KL probe; ``sft`` the
warm start; ``run`` one run end to end (``train``); ``ablation`` what notebooks 03/04 call;
``export`` the model card; ``commands`` the CLI.
"""
