"""Scores: sacreBLEU's BLEU, chrF and TER, and paired significance."""
