"""The onsets-and-frames transcription model."""
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["OnsetsAndFrames"]


class OnsetsAndFrames(nn.Module):
    def __init__(self, input_features, output_features, model_complexity=8):
        super().__init__()
        self.onset_stack = nn.Sequential(nn.Linear(input_features, model_complexity), nn.ReLU(),
                                         nn.Linear(model_complexity, output_features))
        self.frame_stack = nn.Sequential(nn.Linear(input_features, model_complexity), nn.ReLU(),
                                         nn.Linear(model_complexity, output_features))

    def forward(self, mel):
        return self.onset_stack(mel), self.frame_stack(mel)

    def run_on_batch(self, batch):
        mel, onset_label, frame_label = batch
        onset_pred, frame_pred = self(mel)
        predictions = {'onset': onset_pred.sigmoid(), 'frame': frame_pred.sigmoid()}
        losses = {
            'loss/onset': F.binary_cross_entropy_with_logits(onset_pred, onset_label),
            'loss/frame': F.binary_cross_entropy_with_logits(frame_pred, frame_label),
        }
        return predictions, losses
