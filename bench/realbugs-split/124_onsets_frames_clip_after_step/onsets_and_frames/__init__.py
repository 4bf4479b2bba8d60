"""Piano transcription with onsets and frames."""
from .transcriber import *
from .utils import *
