# This file is maintained automatically by "sbx lock".
# Manual edits may be lost in future updates.
