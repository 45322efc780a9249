//! Hermes 0.19.0's own cron tick with the one-line curl script (filled in below).
