alter table widgets add column colour text;
