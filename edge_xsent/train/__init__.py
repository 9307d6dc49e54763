"""The train room: the model's losses (objectives), batches, the loop (loop: Trainer.step and train),
its schedule, run folders and checkpoints (runfolder, carry), where a run starts (warmstart; prune and
student for e5-small's students; e5 reads e5-small), teachers and their cache (teacher, distill), a
model's language subspace removed (debias) and the training benchmark (bench). The top room: it may import
every other."""
